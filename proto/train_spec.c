/* What the table of proto/train_spec.h gives: the defaults, a flag's value
 * checked and set, the --help lines, and the TrainBegin's option fields. */
#include <stddef.h>
#include <string.h>

#include "base/base.h"
#include "proto_int.h"
#include "train_spec.h"

const proto_train_row proto_train_rows[PROTO_TRAIN_OPTIONS] = {
#define ROW(field, letter_, flag_, type_, def, lo, hi, names_, expected_, value_, help_, \
            group_, travels_)                                                            \
    [PROTO_TRAIN_OPT_##field] = {.flag = flag_,                                          \
                                 .letter = letter_,                                      \
                                 .type = PROTO_TRAIN_##type_,                            \
                                 .ilo = (long)(lo),                                      \
                                 .ihi = (long)(hi),                                      \
                                 .dlo = (double)(lo),                                    \
                                 .dhi = (double)(hi),                                    \
                                 .names = names_,                                        \
                                 .expected = expected_,                                  \
                                 .value = value_,                                        \
                                 .help = help_,                                          \
                                 .group = PROTO_TRAIN_##group_,                          \
                                 .travels = PROTO_TRAIN_##travels_},
    PROTO_TRAIN_SPEC(ROW)
#undef ROW
};

void proto_train_spec_defaults(proto_train_spec *s)
{
#define DEFAULT(field, letter, flag, type, def, ...) .field = def,
    *s = (proto_train_spec){PROTO_TRAIN_SPEC(DEFAULT)};
#undef DEFAULT
}

static bool one_of(const char *s, const char *const *names)
{
    for (; *names; names++)
        if (strcmp(s, *names) == 0)
            return true;
    return false;
}

/* The field of option `opt` in `s`, for the one setter. */
static void *field_of(proto_train_spec *s, proto_train_option opt)
{
    static const size_t offsets[PROTO_TRAIN_OPTIONS] = {
#define OFFSET(field, ...) [PROTO_TRAIN_OPT_##field] = offsetof(proto_train_spec, field),
        PROTO_TRAIN_SPEC(OFFSET)
#undef OFFSET
    };
    return (char *)s + offsets[opt];
}

const char *proto_train_spec_set(proto_train_spec *s, proto_train_option opt,
                                 const char *arg)
{
    const proto_train_row *r = &proto_train_rows[opt];
    void *f = field_of(s, opt);
    long v;
    switch (r->type) {
    case PROTO_TRAIN_INT:
    case PROTO_TRAIN_U64:
        if (!base_parse_long(arg, r->ilo, r->ihi, &v))
            return r->expected;
        if (r->type == PROTO_TRAIN_INT)
            *(long *)f = v;
        else
            *(uint64_t *)f = (uint64_t)v;
        return NULL;
    case PROTO_TRAIN_DOUBLE:
        return base_parse_double(arg, r->dlo, r->dhi, f) ? NULL : r->expected;
    case PROTO_TRAIN_NAME:
        *(const char **)f = arg;
        return one_of(arg, r->names) ? NULL : r->expected;
    default: /* PROTO_TRAIN_TEXT */
        *(const char **)f = arg;
        return NULL;
    }
}

void proto_train_spec_help(FILE *f, proto_train_group group)
{
    for (int i = 0; i < PROTO_TRAIN_OPTIONS; i++) {
        const proto_train_row *r = &proto_train_rows[i];
        if (r->group != group)
            continue;
        /* The left column: two spaces, the short option's place, the flag
         * and its value's name; the help from column 26, or two spaces
         * after a longer left column. */
        char left[64];
        if (r->letter)
            snprintf(left, sizeof left, "  -%c, --%s %s", r->letter, r->flag, r->value);
        else
            snprintf(left, sizeof left, "      --%s %s", r->flag, r->value);
        fprintf(f, "%-24s  ", left);
        for (const char *h = r->help; *h;) {
            size_t n = strcspn(h, "\n");
            fprintf(f, "%.*s\n", (int)n, h);
            h += n;
            if (*h && *++h)
                fprintf(f, "%26s", "");
        }
    }
}

/* What each type's field is on the wire: a missing string is "". */
#define PACK_INT(to, from)    to = from
#define PACK_U64(to, from)    to = from
#define PACK_DOUBLE(to, from) to = (float)from
#define PACK_NAME(to, from)   to = (char *)(from ? from : "")
#define PACK_TEXT             PACK_NAME

void proto_train_spec_pack(const proto_train_spec *s, bool peers, Ferry__TrainBegin *a)
{
#define PACK_ALWAYS(type, field) PACK_##type(a->field, s->field);
#define PACK_PEERS(type, field)                                                          \
    if (peers)                                                                           \
        PACK_##type(a->field, s->field);
#define PACK_LOCAL(type, field)
#define PACK(field, letter, flag, type, def, lo, hi, names, expected, value, help,       \
             group, travels)                                                             \
    PACK_##travels(type, field)
    PROTO_TRAIN_SPEC(PACK)
#undef PACK
}

void proto_train_spec_unpack(const Ferry__TrainBegin *a, proto_train_spec *s)
{
    proto_train_spec_defaults(s);
#define UNPACK_ALWAYS(field) s->field = a->field;
#define UNPACK_PEERS(field)  s->field = a->field;
#define UNPACK_LOCAL(field)
#define UNPACK(field, letter, flag, type, def, lo, hi, names, expected, value, help,     \
               group, travels)                                                           \
    UNPACK_##travels(field)
    PROTO_TRAIN_SPEC(UNPACK)
#undef UNPACK
}
