package natsembed

// jetStreamPublish and jetStreamSubscribe are the subjects any JetStream
// client needs; the package doc explains each, and TestPermissionDoc checks
// that it lists exactly these.
func jetStreamPublish() []string {
	return []string{"$JS.API.>", "$JS.ACK.>", "$JS.FC.>", "$KV.>", "$O.>"}
}

func jetStreamSubscribe() []string {
	return []string{"_INBOX.>"}
}

// JetStreamUser returns a user who may use JetStream (its API, acks, flow
// control, key-value buckets and object stores, and the `_INBOX.>` replies)
// and, beyond that, publish to the subjects in publish and subscribe to those
// in subscribe. The slices are copied.
func JetStreamUser(name, password string, publish, subscribe []string) User {
	return User{
		Name:      name,
		Password:  password,
		Publish:   append(jetStreamPublish(), publish...),
		Subscribe: append(jetStreamSubscribe(), subscribe...),
	}
}
