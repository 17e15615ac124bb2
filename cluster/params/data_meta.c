/* How a run saw its data, kept in the file's __metadata__ beside the
 * parameters so that `ferry predict` sees new samples the same way. The
 * format allows strings only: numbers and lists are JSON text in them
 * (params.h lists the keys). */
#include "params.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include <ferry/error.h>

#include "base/base.h"
#include "proto/proto.h"

/* Floats as JSON reals: 9 significant digits read back the same float. */
static json_t *floats(const float *v, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; a && i < n; i++)
        if (json_array_append_new(a, json_real((double)v[i]))) {
            json_decref(a);
            return NULL;
        }
    return a;
}

static char *dump(json_t *j)
{
    char *s =
        j ? json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY | JSON_REAL_PRECISION(9)) : NULL;
    json_decref(j);
    return s;
}

int params_data_meta(const proto_train_begin_reply *b, params_meta *meta, char **text)
{
    memset(text, 0, PARAMS_DATA_META * sizeof *text);
    if (!b || !b->normalize || !b->normalize[0])
        return 0;
    json_t *names = json_array();
    for (size_t i = 0; names && i < b->n_class_names; i++)
        if (json_array_append_new(names, json_string(b->class_names[i]))) {
            json_decref(names);
            names = NULL;
        }
    json_t *input = json_array();
    for (size_t i = 0; input && i < b->n_input; i++)
        json_array_append_new(input, json_integer(b->input[i]));
    char outputs[16];
    snprintf(outputs, sizeof outputs, "%u", b->outputs);
    text[0] = strdup(b->normalize);
    text[1] = dump(floats(b->norm_shift, b->n_norm_shift));
    text[2] = dump(floats(b->norm_scale, b->n_norm_scale));
    text[3] = dump(names);
    text[4] = dump(input);
    text[5] = strdup(outputs);
    static const char *const keys[PARAMS_DATA_META] = {
        "normalize", "norm_shift", "norm_scale", "class_names", "input", "outputs"};
    for (int i = 0; i < PARAMS_DATA_META; i++) {
        if (!text[i]) {
            params_data_meta_free(text);
            return FERRY_ENOMEM;
        }
        meta[i] = (params_meta){keys[i], text[i]};
    }
    return PARAMS_DATA_META;
}

void params_data_meta_free(char **text)
{
    for (int i = 0; i < PARAMS_DATA_META; i++) {
        free(text[i]);
        text[i] = NULL;
    }
}

/* Element i of a list of names ("" for one that is not a string). */
static const char *text_at(json_t *a, size_t i)
{
    const char *s = json_string_value(json_array_get(a, i));
    return s ? s : "";
}

/* The JSON array metadata `key` holds, or NULL with err set. */
static json_t *array(const params_file *f, const char *path, const char *key, char *err,
                     size_t errlen)
{
    const char *s = params_meta_get(f, key);
    json_error_t je;
    json_t *a = s ? json_loads(s, JSON_DECODE_ANY, &je) : NULL;
    if (!json_is_array(a)) {
        json_decref(a);
        base_errf(err, errlen, FERRY_ECORRUPT,
                  "%s: its metadata \"%s\" is %s, not a JSON list", path, key,
                  s ? "another text" : "missing");
        return NULL;
    }
    return a;
}

int params_data_read(const params_file *f, const char *path, proto_predict_req *q,
                     void **owned, char *err, size_t errlen)
{
    *owned = NULL;
    const char *norm = params_meta_get(f, "normalize");
    const char *data = params_meta_get(f, "data");
    q->data = (char *)(data ? data : "");
    if (!norm || !norm[0])
        return 0; /* saved before ferry kept it */
    json_t *a[4] = {array(f, path, "norm_shift", err, errlen), NULL, NULL, NULL};
    a[1] = a[0] ? array(f, path, "norm_scale", err, errlen) : NULL;
    a[2] = a[1] ? array(f, path, "class_names", err, errlen) : NULL;
    a[3] = a[2] ? array(f, path, "input", err, errlen) : NULL;
    int rc = a[3] ? 0 : FERRY_ECORRUPT;
    size_t nn = rc ? 0 : json_array_size(a[0]), nc = rc ? 0 : json_array_size(a[2]);
    const char *outputs = params_meta_get(f, "outputs");
    long out = 0;
    if (rc == 0 && (json_array_size(a[1]) != nn || json_array_size(a[3]) != 3 ||
                    !outputs || !base_parse_long(outputs, 0, INT32_MAX, &out)))
        rc = base_errf(err, errlen, FERRY_ECORRUPT,
                       "%s: its metadata says %zu shifts, %zu scales, a shape of %zu "
                       "numbers and %s outputs",
                       path, nn, rc ? 0 : json_array_size(a[1]), json_array_size(a[3]),
                       outputs ? outputs : "no");
    size_t strings = 0;
    for (size_t i = 0; rc == 0 && i < nc; i++)
        strings += strlen(text_at(a[2], i)) + 1;
    char *blk =
        rc ? NULL
           : malloc((2 * nn + 3) * sizeof(float) + nc * sizeof(char *) + strings + 8);
    if (rc == 0 && !blk)
        rc = base_errf(err, errlen, FERRY_ENOMEM, "%s: no memory", path);
    if (rc == 0) {
        char **names = (char **)(void *)blk;
        float *shift = (float *)(void *)(names + nc), *scale = shift + nn;
        uint32_t *input = (uint32_t *)(void *)(scale + nn);
        char *s = (char *)(input + 3);
        for (size_t i = 0; i < nn; i++) {
            shift[i] = (float)json_number_value(json_array_get(a[0], i));
            scale[i] = (float)json_number_value(json_array_get(a[1], i));
        }
        for (size_t i = 0; i < 3; i++) {
            json_int_t v = json_integer_value(json_array_get(a[3], i));
            input[i] = v > 0 && v <= INT32_MAX ? (uint32_t)v : 0;
        }
        for (size_t i = 0; i < nc; i++) {
            const char *name = text_at(a[2], i);
            names[i] = strcpy(s, name);
            s += strlen(name) + 1;
        }
        q->normalize = (char *)norm;
        q->n_norm_shift = q->n_norm_scale = nn;
        q->norm_shift = shift;
        q->norm_scale = scale;
        q->n_class_names = nc;
        q->class_names = names;
        q->n_input = 3;
        q->input = input;
        q->outputs = (uint32_t)out;
        *owned = blk;
    }
    for (int i = 0; i < 4; i++)
        json_decref(a[i]);
    return rc;
}
