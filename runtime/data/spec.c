/* runtime/data — a run's data options, as the training spec holds them
 * (proto/train_spec.h), made an rt_data_source. */
#include "data_int.h"

#include <string.h>

#include "proto/train_spec.h"

/* "" on the wire is an option left out. */
static const char *given(const char *s)
{
    return s && s[0] ? s : NULL;
}

bool rt_data_source_from_spec(const proto_train_spec *sp, rt_data_source *out)
{
    memset(out, 0, sizeof *out);
    *out = (rt_data_source){
        .path = given(sp->data_dir),
        .labels = given(sp->labels),
        .test_path = given(sp->test_data),
        .test_labels = given(sp->test_labels),
        .x_key = given(sp->x_key),
        .y_key = given(sp->y_key),
        .label = given(sp->label),
        .normalize = given(sp->normalize),
        .test_split = sp->test_split,
        .seed = sp->seed,
    };
    return rt_data_is_file(out->path);
}
