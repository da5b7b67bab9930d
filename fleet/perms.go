package fleet

// Per-node credentials. Each node connects as its own NATS user (its name
// and password in the URL), with its own inbox prefix ("_INBOX.<node>",
// which "mandate node" sets), and may publish only what a node does: the
// JetStream API calls a node makes on the fleet's streams, acknowledgements
// of the work queue, claims and ends of runs (the run state bucket), its
// own heartbeat and its own audit log's copy. So a node cannot beat for
// another, copy entries into another's log, publish a submission, or
// manage the streams (delete, purge, reconfigure them, or consume the work
// queue but through the nodes' consumer), and it reads no other node's
// replies. For children placed on other nodes (place.go) it may
// ask any node to run one, send a child's calls only as the child's node
// (mandate.fwd.*.<node>.>) and answer them only as the owner
// (mandate.ret.*.<node>.>), and receive only its own.
//
// # The JetStream API, call by call
//
// The API is subjects ($JS.API.<call>.<stream>...), so a user is granted
// calls one by one, each on a named stream. A node's user gets these
// (nats.go v1.55 and nats-server v2.15 name them so; TestNodePermissions
// runs everything a node does through them and fails on any refusal):
//
//	STREAM.INFO.<s>, STREAM.CREATE.<s>     Ensure, for the five streams: a node
//	                                       finds them and may create those
//	                                       missing (an empty fleet); never
//	                                       STREAM.UPDATE, .DELETE or .PURGE
//	INFO                                   CreateKeyValue reads the account's
//	                                       limits first
//	CONSUMER.CREATE.MANDATE_RUNS.nodes     the work queue's one consumer, the
//	  .mandate.runs.submit                 durable "nodes", filtered on the
//	CONSUMER.INFO|MSG.NEXT                 submission subject; no other
//	  .MANDATE_RUNS.nodes                  consumer on MANDATE_RUNS, none
//	                                       deleted
//	$JS.ACK.MANDATE_RUNS.nodes.>           its acks (claims, naks, progress);
//	                                       $JS.ACK.*.*.MANDATE_RUNS.nodes.> is
//	                                       the same in the server's v2 format
//	STREAM.MSG.GET.MANDATE_AUDIT           the last entry of its audit copy
//	                                       (the stream has no direct gets)
//	DIRECT.GET.KV_<b>.$KV.<b>.>            KV Get of MANDATE_RUN_STATE and
//	                                       MANDATE_NODES (the buckets have
//	                                       direct gets, as nats.go makes them)
//	STREAM.MSG.GET.KV_<b>                  the reads a decision rests on (a
//	                                       claim, a lost mark), from the
//	                                       stream's leader (lease.go)
//	CONSUMER.CREATE.KV_<b>.*.$KV.<b>.>     ListKeys (and Watch): an ordered
//	CONSUMER.DELETE.KV_<b>.*               consumer filtered on the bucket's
//	$JS.FC.KV_<b>.>                        keys, deleted when it stops (nats.go
//	                                       waits for that), and its flow control
//	DIRECT.GET.OBJ_MANDATE_MODULES         a module's metadata, then its
//	  .$O.MANDATE_MODULES.M.*              chunks through an ordered consumer
//	CONSUMER.CREATE|DELETE.OBJ_..., $JS.FC filtered on $O.MANDATE_MODULES.C.*
//
// and no API call on any other stream. A submitter (SubmitterPermissions)
// gets the same lookups and creations, the bucket reads, and the reads of
// MANDATE_AUDIT that a receipt's check (NodeKey) and VerifyAudit make
// (STREAM.MSG.GET, and an ordered consumer on mandate.audit.*.entry), but no
// consumer on MANDATE_RUNS and no acks.
//
// Why a list and not an account of their own: nats-server can keep the
// streams in one account and export the API subjects to the nodes'
// accounts, but what an import grants is the same kind of subject list,
// with cross-account plumbing (deliver subjects exported back, acks, flow
// control, replies) on top, and it does not close the hole below either
// (a consumer pushes into the streams of its own account). One account and
// this list is what natsembed runs and what the tests check.
//
// What a subject cannot say. A consumer's configuration is the request's
// body, not its subject: a user that may create the ordered consumers KV
// listing and object reads need may make one push what it reads to any
// subject. A stream takes such a message in, whoever made the consumer,
// under the subject the message had. So a node could write a submission
// as a run state's value and push it into MANDATE_RUNS; had the consumer
// "nodes" no filter, it would hand it to a node, which would run it. The
// consumer is filtered on mandate.runs.submit (node.go) and may be created
// only with that filter
// ($JS.API.CONSUMER.CREATE.MANDATE_RUNS.nodes.mandate.runs.submit), so
// such a message lies in the stream unread (TestNodePermissions pushes one
// and it never runs), as it does in the other streams, whose readers all
// filter on their own subjects: junk a compromised node can add, never a
// run. The same
// grant lets a node delete other clients' ordered consumers on the buckets
// (nats.go makes them again). And the first user to create a missing
// stream chooses its configuration: an operator who wants it fixed creates
// the streams first, as an administrator (Ensure then only finds them, and
// the server refuses a create that differs from what exists).

// jsAPI is the JetStream API's prefix.
const jsAPI = "$JS.API."

// fleetStreams are the streams behind the fleet's streams and buckets.
var fleetStreams = []string{StreamRuns, StreamAudit, "KV_" + BucketRuns, "KV_" + BucketNodes, "OBJ_" + BucketModules}

// ensureAPI are the calls Ensure makes: look up each of the fleet's
// streams, create it when missing.
func ensureAPI() []string {
	out := []string{jsAPI + "INFO"}
	for _, s := range fleetStreams {
		out = append(out, jsAPI+"STREAM.INFO."+s, jsAPI+"STREAM.CREATE."+s)
	}
	return out
}

// flowControl are the flow control replies of stream's consumers, in the
// server's v1 format ($JS.FC.<stream>.<consumer>.<n>) and its v2 one
// ($JS.FC.<domain>.<account>.<stream>...).
func flowControl(stream string) []string {
	return []string{"$JS.FC." + stream + ".>", "$JS.FC.*.*." + stream + ".>"}
}

// kvRead are the calls that read bucket: Get, and ListKeys and Watch
// through an ordered consumer filtered on the bucket's keys.
func kvRead(bucket string) []string {
	stream, keys := "KV_"+bucket, "$KV."+bucket+"."
	return append([]string{
		jsAPI + "DIRECT.GET." + stream + "." + keys + ">",
		jsAPI + "STREAM.MSG.GET." + stream,
		jsAPI + "CONSUMER.CREATE." + stream + ".*." + keys + ">",
		jsAPI + "CONSUMER.DELETE." + stream + ".*",
	}, flowControl(stream)...)
}

// objectRead are the calls that read an object of bucket: its metadata,
// then its chunks through an ordered consumer.
func objectRead(bucket string) []string {
	stream, pre := "OBJ_"+bucket, "$O."+bucket+"."
	return append([]string{
		jsAPI + "DIRECT.GET." + stream + "." + pre + "M.*",
		jsAPI + "CONSUMER.CREATE." + stream + ".*." + pre + "C.*",
		jsAPI + "CONSUMER.DELETE." + stream + ".*",
	}, flowControl(stream)...)
}

// NodePermissions are the subjects the NATS user of node may publish and
// subscribe to.
func NodePermissions(node string) (publish, subscribe []string) {
	runs := StreamRuns + "." + consumerName
	publish = ensureAPI()
	publish = append(publish,
		jsAPI+"CONSUMER.CREATE."+runs+"."+SubjectSubmit, // filtered: see "What a subject cannot say"
		jsAPI+"CONSUMER.INFO."+runs,
		jsAPI+"CONSUMER.MSG.NEXT."+runs,
		"$JS.ACK."+runs+".>", "$JS.ACK.*.*."+runs+".>",
		jsAPI+"STREAM.MSG.GET."+StreamAudit,
	)
	publish = append(publish, kvRead(BucketRuns)...)
	publish = append(publish, kvRead(BucketNodes)...)
	publish = append(publish, objectRead(BucketModules)...)
	publish = append(publish,
		"$KV."+BucketRuns+".>",
		"$KV."+BucketNodes+"."+node,
		subjectAudit+node+".>",
		subjectExec+"*",
		subjectFwd+"*."+node+".>",
		subjectRet+"*."+node+".>",
	)
	subscribe = []string{InboxPrefix(node) + ".>", subjectExec + node, subjectFwd + node + ".>", subjectRet + node + ".>"}
	return publish, subscribe
}

// SubmitterPermissions are the subjects a user that only submits runs,
// reads their states and checks the nodes' records (a receipt's key,
// VerifyAudit) needs (its inbox prefix is "_INBOX.<name>").
func SubmitterPermissions(name string) (publish, subscribe []string) {
	entries := subjectAudit + "*.entry"
	publish = ensureAPI()
	publish = append(publish, kvRead(BucketRuns)...)
	publish = append(publish, kvRead(BucketNodes)...)
	publish = append(publish,
		jsAPI+"DIRECT.GET.OBJ_"+BucketModules+".$O."+BucketModules+".M.*",
		jsAPI+"STREAM.MSG.GET."+StreamAudit,
		jsAPI+"CONSUMER.CREATE."+StreamAudit+".*."+entries,
		jsAPI+"CONSUMER.INFO."+StreamAudit+".*",
		jsAPI+"CONSUMER.MSG.NEXT."+StreamAudit+".*",
		jsAPI+"CONSUMER.DELETE."+StreamAudit+".*",
		SubjectSubmit,
		"$KV."+BucketRuns+".>",
		"$O."+BucketModules+".>",
	)
	subscribe = []string{InboxPrefix(name) + ".>"}
	return publish, subscribe
}

// InboxPrefix is the inbox prefix of a node or submitter named name.
func InboxPrefix(name string) string { return "_INBOX." + name }
