/* tests/proto — a view is packed and unpacked by the names in its field list
 * (proto.h), matched against the generated message's descriptor: a list that
 * does not match ferry.proto (a name the message lacks, a member of another
 * size, a list for a single field) is refused with FERRY_EINVAL, both ways,
 * and hands nothing out, rather than copying the wrong bytes. */
#include <criterion/criterion.h>

#include <ferry/ferry.h>

#include "proto/proto_int.h"
#include "refused.h"

/* Views of PingRequest { uint64 nonce = 1; } and LoadModuleReply { ...
 * bool cached = 3; } that get it wrong, each made as proto.h makes the real
 * ones. */
#define MISNAMED_FIELDS(F, LIST) F(uint64_t, nonse)
#define NARROW_FIELDS(F, LIST)   F(uint32_t, nonce)
#define LISTED_FIELDS(F, LIST)   LIST(nonce)
#define WORD_FIELDS(F, LIST)     F(uint32_t, cached)

BAD_VIEW(misnamed, ping_request, MISNAMED_FIELDS)
BAD_VIEW(narrow, ping_request, NARROW_FIELDS)
BAD_VIEW(listed, ping_request, LISTED_FIELDS)
BAD_VIEW(word, load_module_reply, WORD_FIELDS)

/* A PingRequest and a LoadModuleReply with their field set, to unpack. */
static proto_bytes ping_bytes(void)
{
    proto_bytes b = {0};
    cr_assert_eq(proto_ping_req_pack(&(proto_ping_req){.nonce = 77}, &b), 0);
    return b;
}

static proto_bytes module_bytes(void)
{
    proto_bytes b = {0};
    cr_assert_eq(
        proto_load_module_reply_pack(&(proto_load_module_reply){.cached = true}, &b), 0);
    return b;
}

Test(proto_fields, a_name_the_message_lacks_is_refused)
{
    REFUSED_BOTH_WAYS(misnamed, ping_bytes);
}

Test(proto_fields, a_member_narrower_than_its_field_is_refused)
{
    REFUSED_BOTH_WAYS(narrow, ping_bytes);
}

Test(proto_fields, a_list_for_a_single_field_is_refused)
{
    REFUSED_BOTH_WAYS(listed, ping_bytes);
}

Test(proto_fields, a_word_for_a_bool_is_refused)
{
    REFUSED_BOTH_WAYS(word, module_bytes);
}
