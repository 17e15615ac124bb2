/* nodesc.so: a valid shared object that is no ferry task (no descriptor). */
__attribute__((visibility("default"))) int nodesc_answer(void);

int nodesc_answer(void)
{
    return 42;
}
