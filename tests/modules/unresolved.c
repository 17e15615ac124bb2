/* unresolved.so: a complete module whose code needs a symbol nothing
 * defines, so dlopen(RTLD_NOW) itself refuses it. */
#include <ferry/task.h>

void ferry_test_missing_symbol(void);

static int call_missing(ferry_ctx_t *ctx, const ferry_bytes_t *in, ferry_bytes_t *out)
{
    (void)ctx, (void)in, (void)out;
    ferry_test_missing_symbol();
    return 0;
}

FERRY_TASK(.name = "unresolved", .functions = FERRY_FUNCTIONS({"missing", call_missing}));
