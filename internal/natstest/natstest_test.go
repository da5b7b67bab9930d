package natstest_test

import (
	"context"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mandatevm/mandate/internal/natstest"
)

func TestStart(t *testing.T) {
	srv := natstest.Start(t)
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), natstest.Timeout)
	defer cancel()
	if _, err := js.AccountInfo(ctx); err != nil {
		t.Fatalf("AccountInfo: %v", err)
	}
}
