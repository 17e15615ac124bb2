/* The views of messages nested in others, found by their message: the
 * copying in field.c and view.c reaches them from a repeated field's
 * descriptor. */
#include "proto_int.h"

/* ModelMetric: one of TrainEpochReply.metrics. */
PROTO_VIEW_DESC(model_metric, model_metric,
                PROTO_MODEL_METRIC_FIELDS(PROTO_FIELD, PROTO_LIST_FIELD))

const proto_view_desc *proto_nested_view(const ProtobufCMessageDescriptor *msg)
{
    return msg == &ferry__model_metric__descriptor ? model_metric_desc() : NULL;
}
