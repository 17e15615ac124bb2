/* tests/train — an epoch's loss curve: every step while they fit, then
 * pairs merged so that each point stands for as many steps as the others,
 * each the mean of its steps' losses. */
#include <criterion/criterion.h>

#include "runtime/train/train.h"

Test(loss_curve, a_short_epoch_keeps_every_step)
{
    rt_loss_curve c = {0};
    for (int s = 0; s < 10; s++)
        rt_loss_curve_add(&c, s);
    cr_assert_eq(c.n, 10);
    cr_assert_eq(c.every, 1);
    cr_assert_float_eq(c.loss[9], 9.0, 1e-12);
}

Test(loss_curve, a_long_epoch_is_thinned_to_equal_means)
{
    rt_loss_curve c = {0};
    for (int s = 0; s < 200; s++)
        rt_loss_curve_add(&c, s);
    /* 64 points, then 32 of 2 steps, 64 of 2 (128 steps), 32 of 4, and the
     * 72 steps left make 18 more of 4 */
    cr_assert_eq(c.every, 4);
    cr_assert_eq(c.n, 50);
    cr_assert_eq(c.last, 4);
    for (int i = 0; i < c.n; i++)
        cr_assert_float_eq(c.loss[i], 4.0 * i + 1.5, 1e-9, "point %d: %g", i, c.loss[i]);
}

Test(loss_curve, the_last_point_holds_what_was_left)
{
    rt_loss_curve c = {0};
    for (int s = 0; s < 130;
         s++) /* 64 of 2 (128 steps), then 2 steps: merged to 32 of 4, and one of 2 */
        rt_loss_curve_add(&c, s);
    cr_assert_eq(c.every, 4);
    cr_assert_eq(c.n, 33);
    cr_assert_eq(c.last, 2);
    cr_assert_float_eq(c.loss[32], 128.5, 1e-9);
}
