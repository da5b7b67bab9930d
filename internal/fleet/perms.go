package fleet

// Per-node credentials. Each node connects as its own NATS user (its name
// and password in the URL), with its own inbox prefix ("_INBOX.<node>",
// which "mandate node" sets), and may publish only what a node does: the
// JetStream API and acknowledgements, claims and ends of runs (the run
// state bucket), its own heartbeat and its own audit log's copy. So a node
// cannot beat for another, copy entries into another's log, or submit
// runs, and it reads no other node's replies. For children placed on other
// nodes (place.go) it may ask any node to run one, send a child's calls only
// as the child's node (mandate.fwd.*.<node>.>) and answer them only as the
// owner (mandate.ret.*.<node>.>), and receive only its own.
//
// The JetStream API subjects ($JS.API.>) are one grant in NATS: a node's
// user could also, say, delete a stream. A deployment that needs that
// closed too runs the streams in an account of their own and imports into
// each node's account only the API subjects of the streams a node uses.

// NodePermissions are the subjects the NATS user of node may publish and
// subscribe to.
func NodePermissions(node string) (publish, subscribe []string) {
	publish = []string{
		"$JS.API.>", "$JS.ACK.>", "$JS.FC.>",
		"$KV." + BucketRuns + ".>",
		"$KV." + BucketNodes + "." + node,
		subjectAudit + node + ".>",
		subjectExec + "*",
		subjectFwd + "*." + node + ".>",
		subjectRet + "*." + node + ".>",
	}
	subscribe = []string{InboxPrefix(node) + ".>", subjectExec + node, subjectFwd + node + ".>", subjectRet + node + ".>"}
	return publish, subscribe
}

// SubmitterPermissions are the subjects a user that only submits runs and
// reads their states needs (its inbox prefix is "_INBOX.<name>").
func SubmitterPermissions(name string) (publish, subscribe []string) {
	publish = []string{
		"$JS.API.>", "$JS.FC.>",
		SubjectSubmit,
		"$KV." + BucketRuns + ".>",
		"$O." + BucketModules + ".>",
	}
	subscribe = []string{InboxPrefix(name) + ".>"}
	return publish, subscribe
}

// InboxPrefix is the inbox prefix of a node or submitter named name.
func InboxPrefix(name string) string { return "_INBOX." + name }
