/* An epoch's loss curve, thinned as it grows (train.h: rt_loss_curve):
 * a run's record draws the training loss by step, not only once an epoch,
 * at a fixed cost in the epoch's reply. */
#include "train.h"

void rt_loss_curve_add(rt_loss_curve *c, double loss)
{
    if (!c->every)
        c->every = 1;
    if (c->n && c->last < c->every) { /* the last point is still filling */
        c->loss[c->n - 1] += (loss - c->loss[c->n - 1]) / (double)(c->last + 1);
        c->last++;
        return;
    }
    if (c->n == RT_CURVE_MAX) { /* full: pairs merge, each point twice the steps */
        for (int i = 0; i < RT_CURVE_MAX / 2; i++)
            c->loss[i] = (c->loss[2 * i] + c->loss[2 * i + 1]) / 2;
        c->n = RT_CURVE_MAX / 2;
        c->every *= 2;
        c->last = c->every; /* the merged last point is whole */
        rt_loss_curve_add(c, loss);
        return;
    }
    c->loss[c->n++] = loss;
    c->last = 1;
}
