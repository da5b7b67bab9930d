package kernel

import (
	"bytes"
	"fmt"
	"sync"

	"github.com/hashicorp/go-hclog"
)

// DefaultMaxOutput bounds what is kept of each of a task's stdout and
// stderr.
const DefaultMaxOutput = 1 << 20

// maxLogLine bounds one forwarded log line.
const maxLogLine = 4096

// logLineCost is what one forwarded line is charged beyond its bytes: the
// log record around it (time, level, the task's fields). What is written
// to the log about a stream is bounded by the stream's limit, so 1 MiB of
// newlines cannot become hundreds of MiB of log records.
const logLineCost = 256

// outputWriter captures a guest stream up to a limit and forwards each
// line to the task's logger. Past the limit bytes are counted, not kept,
// and the truncation is logged once and reported by Truncated: a flood is
// contained and never silent.
type outputWriter struct {
	mu        sync.Mutex
	stream    string
	logger    hclog.Logger
	limit     int
	buf       bytes.Buffer // kept output; protected by mu
	line      []byte       // partial line; protected by mu
	dropped   int64        // protected by mu
	truncated bool         // protected by mu
	logged    int          // what forwarded lines cost so far; protected by mu
	unlogged  int          // lines not forwarded once the cost reached the limit; protected by mu
	// withhold, when set, reports that what the task writes now may be
	// influenced by data its answer must not carry (its result refuses
	// untrusted data and its label has an integrity taint): from then on
	// the stream is withheld, kept but never forwarded to the log.
	withhold func() bool
	withheld bool // protected by mu
	held     int  // lines withheld; protected by mu
}

func newOutputWriter(stream string, logger hclog.Logger, limit int) *outputWriter {
	if limit <= 0 {
		limit = DefaultMaxOutput
	}
	return &outputWriter{stream: stream, logger: logger, limit: limit}
}

func (w *outputWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := len(p)
	if w.withhold != nil && !w.withheld && w.withhold() {
		w.withheld = true
		w.logger.Warn("guest output withheld from the log: the task read data its answer refuses (result { accepts_untrusted = false } or refuses_taints); mandate logs --raw shows it",
			"stream", w.stream)
	}
	room := w.limit - w.buf.Len()
	if room < len(p) {
		if room < 0 {
			room = 0
		}
		w.dropped += int64(len(p) - room)
		p = p[:room]
		if !w.truncated {
			w.truncated = true
			w.logger.Warn("guest output truncated", "stream", w.stream, "limit", w.limit)
		}
	}
	w.buf.Write(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			w.line = append(w.line, p...)
			if len(w.line) > maxLogLine {
				w.flushLine()
			}
			break
		}
		w.line = append(w.line, p[:i]...)
		w.flushLine()
		p = p[i+1:]
	}
	return n, nil // the guest never sees a short write: excess is dropped
}

// flushLine forwards the partial line.
//
// Preconditions: w.mu is held.
func (w *outputWriter) flushLine() {
	if len(w.line) > maxLogLine {
		w.line = w.line[:maxLogLine]
	}
	cost := len(w.line) + logLineCost
	switch {
	case w.withheld:
		w.held++
	case w.logged+cost <= w.limit:
		w.logged += cost
		w.logger.Info(w.stream, "line", string(w.line))
	case w.unlogged == 0:
		w.unlogged++
		w.logger.Warn("guest output no longer forwarded to the log (what is logged of a stream is bounded by its limit)",
			"stream", w.stream, "limit", w.limit)
	default:
		w.unlogged++
	}
	w.line = w.line[:0]
}

// close forwards any unterminated last line and reports truncation.
func (w *outputWriter) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.line) > 0 {
		w.flushLine()
	}
	if w.truncated {
		w.logger.Warn("guest output was truncated", "stream", w.stream, "kept", w.buf.Len(), "dropped", w.dropped)
	}
	if w.unlogged > 0 {
		w.logger.Warn("guest output lines not forwarded to the log", "stream", w.stream, "lines", w.unlogged)
	}
	if w.held > 0 {
		w.logger.Warn("guest output lines withheld", "stream", w.stream, "lines", w.held)
	}
}

// Output is what was kept of a stream.
type Output struct {
	Data      []byte
	Truncated bool
	Dropped   int64
	// Withheld: some of it was written once the task carried untrusted
	// data that its answer refuses (result { accepts_untrusted = false }
	// or refuses_taints): it is not the task's answer, and is shown only
	// on request.
	Withheld bool
}

func (w *outputWriter) output() Output {
	w.mu.Lock()
	defer w.mu.Unlock()
	return Output{Data: bytes.Clone(w.buf.Bytes()), Truncated: w.truncated, Dropped: w.dropped, Withheld: w.withheld}
}

// isWithheld reports whether the stream was withheld (Output.Withheld).
func (w *outputWriter) isWithheld() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.withheld
}

// lastLine is the last line of what was kept that is not blank, cut to
// maxReasonLine bytes: what a failing guest said last.
func (w *outputWriter) lastLine() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	b := bytes.TrimRight(w.buf.Bytes(), " \t\r\n")
	if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
		b = b[i+1:]
	}
	b = bytes.TrimSpace(b)
	if len(b) > maxReasonLine {
		return string(b[:maxReasonLine]) + "..."
	}
	return string(b)
}

// maxReasonLine bounds what a failed task's error quotes of its stderr.
const maxReasonLine = 300

// String renders the output with a visible truncation mark.
func (o Output) String() string {
	if !o.Truncated {
		return string(o.Data)
	}
	return string(o.Data) + fmt.Sprintf("\n[output truncated: %d bytes dropped]\n", o.Dropped)
}
