// Command natsd runs one NATS server of internal/faults' cluster as its own
// process, so that the test can kill it (SIGKILL: a crash, no leader steps
// down) as well as stop it (SIGTERM: natsembed's Shutdown). Its argument is
// a natsembed.Config as JSON; it prints "ready" once the server is
// (natsembed.Server.WaitReady), and runs until it is signalled.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/hashicorp/go-hclog"
	"github.com/mandatevm/mandate/internal/natsembed"
)

func main() {
	var cfg natsembed.Config
	if len(os.Args) != 2 || json.Unmarshal([]byte(os.Args[1]), &cfg) != nil {
		fmt.Fprintln(os.Stderr, "usage: natsd CONFIG-JSON")
		os.Exit(2)
	}
	cfg.Logger = hclog.New(&hclog.LoggerOptions{Name: "nats " + cfg.Name, Level: hclog.Warn, Output: os.Stderr})
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	srv, err := natsembed.Start(ctx, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer srv.Shutdown()
	if err := srv.WaitReady(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println("ready")
	<-ctx.Done()
}
