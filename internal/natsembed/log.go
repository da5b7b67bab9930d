package natsembed

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/go-hclog"
	"github.com/nats-io/nats-server/v2/server"
)

// logAdapter is the server's logger: it sends each line to an hclog.Logger
// and keeps the first fatal error, which the server logs (and does not
// return) when it cannot listen or start JetStream.
type logAdapter struct {
	log   hclog.Logger
	ready atomic.Bool // the server said "Server is ready": its banner is over

	mu    sync.Mutex
	fatal error // protected by mu; the first Fatalf
}

var _ server.Logger = (*logAdapter)(nil)

func newLogAdapter(l hclog.Logger) *logAdapter {
	if l == nil {
		l = hclog.NewNullLogger()
	}
	return &logAdapter{log: l}
}

// Noticef logs the server's notices at info, but for its start-up banner
// (the logo, version, paths and limits, everything before "Server is
// ready"), which goes to debug: one line says the server started.
func (a *logAdapter) Noticef(format string, v ...any) {
	msg := fmt.Sprintf(format, v...)
	if a.ready.Load() {
		a.log.Info(msg)
		return
	}
	if msg == "Server is ready" {
		a.ready.Store(true)
		a.log.Info("NATS server is ready")
		return
	}
	a.log.Debug(msg)
}

func (a *logAdapter) Warnf(format string, v ...any)  { a.log.Warn(fmt.Sprintf(format, v...)) }
func (a *logAdapter) Errorf(format string, v ...any) { a.log.Error(fmt.Sprintf(format, v...)) }
func (a *logAdapter) Debugf(format string, v ...any) { a.log.Debug(fmt.Sprintf(format, v...)) }
func (a *logAdapter) Tracef(format string, v ...any) { a.log.Trace(fmt.Sprintf(format, v...)) }

func (a *logAdapter) Fatalf(format string, v ...any) {
	msg := fmt.Sprintf(format, v...)
	a.log.Error(msg, "fatal", true)
	a.mu.Lock()
	if a.fatal == nil {
		a.fatal = errors.New("natsembed: " + msg)
	}
	a.mu.Unlock()
}

// failed returns the first fatal error the server logged, or nil.
func (a *logAdapter) failed() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.fatal
}
