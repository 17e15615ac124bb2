/* tests/rpc — a TCP relay on 127.0.0.1 that a test can hold: while held it
 * stops reading what the client sends (the server's side still flows), so
 * the client's bytes pile up in its kernel buffer and then in gRPC's own
 * output buffer, as they do behind a peer that has stopped reading. */
#ifndef FERRY_TESTS_RPC_RELAY_H
#define FERRY_TESTS_RPC_RELAY_H

#include <stdbool.h>

typedef struct h_relay h_relay;

/* Listens on 127.0.0.1:0 and relays each connection to 127.0.0.1:to_port.
 * Returns NULL when it cannot. */
h_relay *h_relay_start(int to_port);
int h_relay_port(const h_relay *r);
/* Stops (true) or resumes (false) reading from the clients. */
void h_relay_hold(h_relay *r, bool hold);
/* Closes every connection and the listener, and frees. NULL is a no-op. */
void h_relay_stop(h_relay *r);

#endif
