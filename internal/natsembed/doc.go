// Package natsembed runs a NATS server with JetStream inside the mandate
// process: one server for `mandate node --embedded-nats` and for tests, or one
// member of a cluster whose servers route to each other.
//
//	srv, err := natsembed.Start(ctx, natsembed.Config{StoreDir: dir})
//	if err != nil {
//		return err
//	}
//	defer srv.Shutdown()
//	if err := srv.WaitReady(ctx); err != nil {
//		return err
//	}
//	nc, err := nats.Connect(srv.ClientURL())
//
// The runnable version is Example in example_test.go.
//
// # Listening
//
// The server listens for clients, and in a cluster for routes, on loopback
// only (127.0.0.1 by default) and on a random client port unless Config.Port
// says otherwise. Any other host is refused unless Config.AllowNonLoopback is
// set. Nothing else listens: no monitoring port, no leaf nodes, no gateways,
// no websocket or MQTT.
//
// # Users and the subjects a JetStream client needs
//
// Without Config.Users any client may connect and do anything. With users,
// each has a password and allow lists of the subjects it may publish to and
// subscribe to; an empty list allows nothing. All users share one account
// (the server's global account), which has JetStream, so they see the same
// streams, key-value buckets and object stores.
//
// A JetStream client (nats.go's jetstream package) needs, beyond the subjects
// of its own messages (JetStreamUser grants exactly these):
//
//	publish   $JS.API.>   the JetStream API: streams, consumers, pull requests
//	                      ($JS.API.CONSUMER.MSG.NEXT.>), direct gets of KV keys
//	                      ($JS.API.DIRECT.GET.>)
//	publish   $JS.ACK.>   acknowledging a message (its reply subject)
//	publish   $JS.FC.>    answering flow control of push and ordered consumers,
//	                      which KV watchers and object-store reads use
//	publish   $KV.>       putting and deleting keys of a key-value bucket
//	publish   $O.>        putting objects: chunks and metadata
//	subscribe _INBOX.>    replies to API calls and publish acks, and messages
//	                      of pull and ordered consumers
//
// plus allow_responses (User.AllowResponses) only if the client answers
// requests itself. Publishing to a stream's subjects (js.Publish) also needs
// those subjects in the publish list: JetStream is not a way around them.
//
// Subscribing to `_INBOX.>` lets a user read the replies meant for another
// user; where that matters, give each user its own prefix (nats.go's
// nats.CustomInboxPrefix("_INBOX_node-a")) and replace `_INBOX.>` in its
// subscribe list with `_INBOX_node-a.>`.
//
// # Logging
//
// The server logs nothing unless Config.Logger is set; then its notices go to
// Info, warnings to Warn, errors and fatal errors to Error, and its debug and
// trace lines to Debug and Trace when the logger is at those levels.
package natsembed
