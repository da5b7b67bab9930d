//go:build unix

package faults

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"
)

// clockWatch notes each time this machine's wall clock moves away from its
// monotonic clock: the clock stepped (NTP, a VM's clock catching up) or
// the whole machine was paused without its monotonic clock counting it.
// A node treats its wall clock's jump as a suspension it slept through
// and fences itself (docs/fleet.md, "Timing assumptions"), so on the
// test's one machine a forward step of more than what is left of the
// nodes' lease fences every node at once: a fault of the machine, not of
// the fleet, which the report names instead of blaming the fleet.
type clockWatch struct {
	mu    sync.Mutex
	steps []clockStep
}

type clockStep struct {
	at time.Time     // when it was seen (monotonic)
	d  time.Duration // how far the wall clock moved past the monotonic one
}

// watchClock samples both clocks every 100 ms until ctx ends, and keeps
// each difference of more than 500 ms.
func watchClock(ctx context.Context) *clockWatch {
	c := &clockWatch{}
	go func() {
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		last := time.Now()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			now := time.Now()
			d := now.Round(0).Sub(last.Round(0)) - now.Sub(last)
			if d > 500*time.Millisecond || d < -500*time.Millisecond {
				c.mu.Lock()
				c.steps = append(c.steps, clockStep{at: now, d: d})
				c.mu.Unlock()
			}
			last = now
		}
	}()
	return c
}

// forward sums the forward steps seen between from and to.
func (c *clockWatch) forward(from, to time.Time) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	var sum time.Duration
	for _, s := range c.steps {
		if s.d > 0 && !s.at.Before(from) && !s.at.After(to) {
			sum += s.d
		}
	}
	return sum
}

// describe lists the steps seen between from and to.
func (e *env) clockSteps(from, to time.Time) string {
	e.clock.mu.Lock()
	defer e.clock.mu.Unlock()
	var out []string
	for _, s := range e.clock.steps {
		if !s.at.Before(from) && !s.at.After(to) {
			out = append(out, fmt.Sprintf("%+.3fs at %s", s.d.Seconds(), e.at(s.at)))
		}
	}
	return strings.Join(out, ", ")
}

// clockFenced reports whether a node fencing itself at "at" is explained
// by the machine's wall clock: a forward step of at least a second within
// the lease (and the heartbeat's time to notice) before it.
func (e *env) clockFenced(at time.Time) (string, bool) {
	from := at.Add(-e.lease - 2*time.Second)
	if e.clock.forward(from, at) < time.Second {
		return "", false
	}
	return e.clockSteps(from, at), true
}
