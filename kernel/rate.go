package kernel

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/kernel/kindapi"
)

// Rate bounds how often a capability may be called: at most N calls in any
// Per, with bursts of at most N (a token bucket refilled at N per Per). A
// rate set on a grant holds for the whole subtree derived from it, children's
// copies included, as a payment budget does: deriving or spawning never
// yields a fresh allowance. The zero Rate is no bound.
type Rate struct {
	N   int
	Per time.Duration
}

// IsZero reports whether r sets no bound.
func (r Rate) IsZero() bool { return r.N == 0 }

// String is the form ParseRate reads, e.g. "10/s".
func (r Rate) String() string {
	if r.IsZero() {
		return ""
	}
	switch r.Per {
	case time.Second:
		return fmt.Sprintf("%d/s", r.N)
	case time.Minute:
		return fmt.Sprintf("%d/m", r.N)
	case time.Hour:
		return fmt.Sprintf("%d/h", r.N)
	}
	return fmt.Sprintf("%d/%s", r.N, r.Per)
}

// Bounds of a rate.
const (
	maxRateN   = 1 << 30
	minRatePer = time.Millisecond
	maxRatePer = 24 * time.Hour
)

// ParseRate reads "N/UNIT": N a whole number of calls, UNIT s, m, h (also
// sec, min, hour) or a Go duration such as 500ms or 10m.
func ParseRate(s string) (Rate, error) {
	num, unit, ok := strings.Cut(strings.TrimSpace(s), "/")
	if !ok {
		return Rate{}, fmt.Errorf("rate %q: want calls/unit, e.g. \"10/s\" or \"100/m\"", s)
	}
	n, err := strconv.Atoi(strings.TrimSpace(num))
	if err != nil || n < 1 || n > maxRateN {
		return Rate{}, fmt.Errorf("rate %q: the number of calls must be a whole number from 1 to %d", s, maxRateN)
	}
	var per time.Duration
	switch u := strings.TrimSpace(unit); u {
	case "s", "sec", "second":
		per = time.Second
	case "m", "min", "minute":
		per = time.Minute
	case "h", "hour":
		per = time.Hour
	default:
		per, err = time.ParseDuration(u)
		if err != nil {
			return Rate{}, fmt.Errorf("rate %q: unknown unit %q (s, m, h or a duration such as 500ms)", s, u)
		}
	}
	if per < minRatePer || per > maxRatePer {
		return Rate{}, fmt.Errorf("rate %q: the period must be from %s to %s", s, minRatePer, maxRatePer)
	}
	return Rate{N: n, Per: per}, nil
}

// bucket is the token bucket of one rate-limited capability.
type bucket struct {
	rate Rate

	mu     sync.Mutex
	tokens float64   // protected by mu
	last   time.Time // protected by mu
}

func newBucket(r Rate, now time.Time) *bucket {
	return &bucket{rate: r, tokens: float64(r.N), last: now}
}

// refill adds the tokens earned since the last call.
//
// Preconditions: b.mu is held.
func (b *bucket) refill(now time.Time) {
	if el := now.Sub(b.last); el > 0 {
		b.tokens = min(float64(b.rate.N), b.tokens+float64(b.rate.N)*float64(el)/float64(b.rate.Per))
		b.last = now
	}
}

// takeRate takes one call from the bucket of c and of every ancestor that has
// one, all or none: a call refused by a parent's rate does not spend the
// child's allowance. Buckets are locked root first, so concurrent calls on
// one subtree cannot deadlock. It reports whether any bucket was charged,
// for giveRate when the call is then refused: a refused call spends no
// token.
func takeRate(c *Cap, clock func() time.Time) (bool, error) {
	var local [8]*bucket // no allocation for chains of up to 8 rates
	chain := local[:0]
	for x := c; x != nil; x = x.parent {
		if x.rate != nil {
			chain = append(chain, x.rate)
		}
	}
	if len(chain) == 0 {
		return false, nil // no clock read on the common path
	}
	now := clock()
	for i := len(chain) - 1; i >= 0; i-- {
		chain[i].mu.Lock()
	}
	defer func() {
		for _, b := range chain {
			b.mu.Unlock()
		}
	}()
	for _, b := range chain {
		b.refill(now)
		if b.tokens < 1 {
			return false, kindapi.Errorf(abi.ELIMIT, "rate limit %s reached; retry later", b.rate)
		}
	}
	for _, b := range chain {
		b.tokens--
	}
	return true, nil
}

// giveRate returns the token takeRate took from each bucket of c's chain.
// The chain is immutable, so walking it again finds the same buckets.
func giveRate(c *Cap) {
	for x := c; x != nil; x = x.parent {
		if b := x.rate; b != nil {
			b.mu.Lock()
			b.tokens = min(float64(b.rate.N), b.tokens+1)
			b.mu.Unlock()
		}
	}
}
