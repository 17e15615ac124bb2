/* tests/runs — a run's record holds the learning rate step by step: with
 * the cosine schedule it starts at --lr and decays to nearly 0 by the last
 * step, over the same points as the loss curve. */
#include "e2e.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster/runs/runs.h"

TestSuite(runs_lr, .init = e2e_setup, .fini = e2e_teardown, .timeout = 240);

Test(runs_lr, the_record_has_the_cosine_schedules_rate_step_by_step)
{
    e2e_start(2);
    e2e_run r;
    e2e_ferry(&r, E2E_CMD_MS * 4, "submit", e2e_task("mlp"), "--epochs", "2", "--lr",
              "0.1", "--schedule", "cosine", "-q", NULL);
    E2E_EXPECT(&r, 0);
    e2e_run_fini(&r);
    char dir[4200], err[512], path[4300];
    cr_assert(runs_find(e2e_home, "last", dir, sizeof dir, err, sizeof err) == 0, "%s",
              err);
    snprintf(path, sizeof path, "%s/metrics.jsonl", dir);
    FILE *f = fopen(path, "r");
    cr_assert(f, "%s", path);
    char line[65536];
    double first = -1, prev = 1e9, last = -1;
    int epochs = 0, points = 0;
    while (fgets(line, sizeof line, f)) {
        json_t *ev = json_loads(line, 0, NULL);
        cr_assert(ev, "%s: not JSON: %s", path, line);
        if (strcmp(json_string_value(json_object_get(ev, "event")), "epoch") == 0) {
            json_t *curve = json_object_get(ev, "loss_curve");
            json_t *lr = json_object_get(curve, "lr");
            cr_assert(json_is_array(lr) && json_array_size(lr) > 1 &&
                          json_array_size(lr) ==
                              json_array_size(json_object_get(curve, "loss")),
                      "an epoch without its learning rate by step: %s", line);
            for (size_t i = 0; i < json_array_size(lr); i++) {
                double v = json_number_value(json_array_get(lr, i));
                cr_assert(v >= 0 && v <= 0.1 + 1e-6 && v <= prev + 1e-9,
                          "lr %g after %g: not the cosine's decay", v, prev);
                if (first < 0)
                    first = v;
                prev = last = v;
                points++;
            }
            cr_assert(json_number_value(json_object_get(ev, "lr")) == last,
                      "the epoch's lr is not its last step's: %s", line);
            epochs++;
        }
        json_decref(ev);
    }
    fclose(f);
    cr_assert(epochs == 2 && points > 10, "%d epochs, %d points", epochs, points);
    cr_assert(first > 0.099 && last < 0.001, "lr from %g to %g", first, last);
}
