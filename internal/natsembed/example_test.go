package natsembed_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mandatevm/mandate/internal/natsembed"
)

func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir, err := os.MkdirTemp("", "natsembed")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	srv, err := natsembed.Start(ctx, natsembed.Config{StoreDir: dir})
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Shutdown()
	if err := srv.WaitReady(ctx); err != nil {
		log.Fatal(err)
	}

	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		log.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		log.Fatal(err)
	}
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "nodes"})
	if err != nil {
		log.Fatal(err)
	}
	if _, err := kv.PutString(ctx, "a", "up"); err != nil {
		log.Fatal(err)
	}
	e, err := kv.Get(ctx, "a")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s=%s\n", e.Key(), e.Value())
	// Output: a=up
}
