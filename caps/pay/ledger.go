package pay

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sync"

	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/kernel"
)

// MaxKeys bounds the idempotency keys one capability tree remembers.
const MaxKeys = 1 << 16

// tree is what a root grant and everything derived from it share: one lock
// over every ledger of the tree, and the idempotency keys used anywhere in
// it.
type tree struct {
	id   string // random; namespaces the keys sent to the provider
	mu   sync.Mutex
	keys map[string]*keyEntry // guarded by mu
}

func newTree() *tree {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return &tree{id: hex.EncodeToString(b[:]), keys: make(map[string]*keyEntry)}
}

// ledger is one node of a tree's spending record: every scope has its own,
// linked to its parent scope's. spent and uses count everything charged (or
// reserved by a charge in flight) through this scope and every scope
// derived from it. All fields but the limits are guarded by tree.mu.
type ledger struct {
	tree    *tree
	parent  *ledger
	budget  int64 // minor units; -1: none
	maxUses int64 // -1: none
	spent   int64
	uses    int64
}

func newLedger(parent *ledger, budget, maxUses int64) *ledger {
	l := &ledger{parent: parent, budget: budget, maxUses: maxUses}
	if parent != nil {
		l.tree = parent.tree
	} else {
		l.tree = newTree()
	}
	return l
}

// within reports whether l is a or a ledger below a.
func (l *ledger) within(a *ledger) bool {
	for n := l; n != nil; n = n.parent {
		if n == a {
			return true
		}
	}
	return false
}

// reserve debits amount and one use on l and every ancestor, atomically:
// either all have room and all are debited, or none is and the error
// (ELIMIT) says which limit was reached.
func (l *ledger) reserve(amount int64) error {
	l.tree.mu.Lock()
	defer l.tree.mu.Unlock()
	depth := 0
	for n := l; n != nil; n = n.parent {
		if n.budget >= 0 && n.spent+amount > n.budget {
			return kernel.Errorf(abi.ELIMIT, "pay: budget exhausted: %s of %s spent, %s more requested%s",
				formatMinor(n.spent), formatMinor(n.budget), formatMinor(amount), ancestorNote(depth))
		}
		if n.maxUses >= 0 && n.uses+1 > n.maxUses {
			return kernel.Errorf(abi.ELIMIT, "pay: all %d uses spent%s", n.maxUses, ancestorNote(depth))
		}
		depth++
	}
	for n := l; n != nil; n = n.parent {
		n.spent += amount
		n.uses++
	}
	return nil
}

// release undoes a reserve whose charge did not happen.
func (l *ledger) release(amount int64) {
	l.tree.mu.Lock()
	defer l.tree.mu.Unlock()
	for n := l; n != nil; n = n.parent {
		n.spent -= amount
		n.uses--
	}
}

// Spent returns what this node's subtree has charged (or holds reserved),
// in minor units, and how many charges.
func (l *ledger) totals() (int64, int64) {
	l.tree.mu.Lock()
	defer l.tree.mu.Unlock()
	return l.spent, l.uses
}

func ancestorNote(depth int) string {
	if depth == 0 {
		return ""
	}
	return fmt.Sprintf(" (on the capability %d level(s) up the derivation chain)", depth)
}

// keyEntry is an idempotency key in use in a tree: pending while its
// charge is in flight (done open), then holding the receipt.
type keyEntry struct {
	payee    string
	currency string
	amount   int64
	done     chan struct{}
	receipt  []byte // set before done is closed, on success
}

// claim looks key up for a charge of amount currency to payee. It returns
// the receipt of an earlier charge with the same key (replay), or
// owner=true when the caller must perform the charge and then call finish.
// A key used for a different charge is EDENIED. While another call holds
// the key, claim waits for it.
func (t *tree) claim(ctx context.Context, key, payee, currency string, amount int64) (receipt []byte, owner *keyEntry, err error) {
	for {
		t.mu.Lock()
		e, ok := t.keys[key]
		if !ok {
			if len(t.keys) >= MaxKeys {
				t.mu.Unlock()
				return nil, nil, kernel.Errorf(abi.ELIMIT, "pay: %d idempotency keys in use (max %d)", len(t.keys), MaxKeys)
			}
			e = &keyEntry{payee: payee, currency: currency, amount: amount, done: make(chan struct{})}
			t.keys[key] = e
			t.mu.Unlock()
			return nil, e, nil
		}
		t.mu.Unlock()
		if e.payee != payee || e.currency != currency || e.amount != amount {
			return nil, nil, kernel.Errorf(abi.EDENIED,
				"pay: idempotency key %s was used for a charge of %s %s to %s, not %s %s to %s",
				quoteTrunc(key), formatMinor(e.amount), e.currency, e.payee, formatMinor(amount), currency, payee)
		}
		select {
		case <-e.done:
		case <-ctx.Done():
			return nil, nil, kernel.Errorf(abi.ETIMEDOUT, "pay: waiting for the charge with idempotency key %s: %v", quoteTrunc(key), ctx.Err())
		}
		if e.receipt != nil {
			return e.receipt, nil, nil
		}
		// The other charge failed and gave the key up: try again.
	}
}

// finish ends a claim: with the receipt on success, or giving the key up
// (receipt nil) so that a retry may charge.
func (t *tree) finish(key string, e *keyEntry, receipt []byte) {
	t.mu.Lock()
	if receipt == nil {
		delete(t.keys, key)
	} else {
		e.receipt = receipt
	}
	t.mu.Unlock()
	close(e.done)
}
