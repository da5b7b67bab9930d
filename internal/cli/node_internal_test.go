package cli

import "testing"

// TestNatsUser: the inbox prefix of a CLI connection follows the user the
// URL names, so a user with fleet.SubmitterPermissions gets its replies.
func TestNatsUser(t *testing.T) {
	for urls, want := range map[string]string{
		"nats://127.0.0.1:4222":                      "",
		"nats://alice:secret@127.0.0.1:4222":         "alice",
		"nats://sub:pw@a:4222,nats://sub:pw@b:4222":  "sub",
		"nats://we.ird:pw@a:4222":                    "",
		"nats://:pw@a:4222":                          "",
		"::not a url":                                "",
		" nats://node-b:x@h:1 , nats://node-b:x@h:2": "node-b",
	} {
		if got := natsUser(urls); got != want {
			t.Errorf("natsUser(%q) = %q, want %q", urls, got, want)
		}
	}
}
