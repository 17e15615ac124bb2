/* tests/proto — a view whose field list does not match its message: its
 * pack and its unpack of the message's bytes (bytes() makes them) both
 * refuse with FERRY_EINVAL and hand nothing out. */
#ifndef FERRY_TESTS_PROTO_REFUSED_H
#define FERRY_TESTS_PROTO_REFUSED_H

#include <criterion/criterion.h>

#include <ferry/ferry.h>

/* A view proto_<view> of ferry__<message> with the field list FIELDS, made
 * as proto.h makes the real ones (in a file that includes proto_int.h). */
#define BAD_VIEW(view, message, FIELDS)                                                  \
    typedef struct proto_##view {                                                        \
        FIELDS(PROTO_MEMBER, PROTO_LIST_MEMBER)                                          \
    } proto_##view;                                                                      \
    int proto_##view##_pack(const proto_##view *in, proto_bytes *out);                   \
    int proto_##view##_unpack(const void *buf, size_t len, proto_##view **out);          \
    PROTO_VIEW(view, message, FIELDS)

#define REFUSED_BOTH_WAYS(view, bytes)                                                   \
    do {                                                                                 \
        proto_bytes out = {(uint8_t *)"x", 1};                                           \
        cr_expect_eq(proto_##view##_pack(&(proto_##view){0}, &out), FERRY_EINVAL);       \
        cr_expect_null(out.data);                                                        \
        cr_expect_eq(out.len, 0);                                                        \
        proto_bytes b = bytes();                                                         \
        proto_##view *v = (proto_##view *)&v; /* not NULL: the unpack must clear it */   \
        cr_expect_eq(proto_##view##_unpack(b.data, b.len, &v), FERRY_EINVAL);            \
        cr_expect_null(v);                                                               \
        proto_bytes_fini(&b);                                                            \
    } while (0)

#endif
