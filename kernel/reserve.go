package kernel

import (
	"time"

	"github.com/mandatevm/mandate/guest-sdk/abi"
	"github.com/mandatevm/mandate/kernel/kindapi"
)

// Reservations: what a call holds while the pipeline decides it (a table
// slot for its result, rate tokens, uses and budget), given back whole on a
// refusal and committed only once its effect ran.

// reservation is what a call holds while it is decided: a table slot for
// its result, rate tokens and uses on the capability's chain.
type reservation struct {
	slot    int  // -1: none
	rated   *Cap // the capability whose chain gave rate tokens; nil: none
	allowed *Cap // the capability whose chain gave uses and budget; nil: none
	amount  int64
	undo    func() // gives back Op.Reserve's reservation
	use     *use   // the call, pending in its chain's histories (history.go); nil: none
	settled bool   // rates, allowances and the use committed or released
}

// reserve takes everything the call needs before any check that can
// refuse it, all or nothing.
func (t *Task) reserve(c *Cap, prep *kindapi.Op, mode callMode, r *reservation) error {
	r.slot = -1
	if !prep.NoResult {
		slot, err := t.table.reserve()
		if err != nil {
			return err
		}
		r.slot = slot
	}
	if mode == modeDerive {
		r.settled = true
		return nil
	}
	if prep.Reserve != nil {
		undo, free, err := prep.Reserve()
		if err != nil {
			r.release(t.table)
			return err
		}
		r.undo = undo
		if free {
			prep.Free = true
		}
	}
	if c != nil && c.chain&chainRate != 0 {
		took, err := takeRate(c, time.Now)
		if err != nil {
			r.release(t.table)
			return err
		}
		if took {
			r.rated = c
		}
	}
	if !prep.Free {
		if c != nil && c.chain&chainAllowance != 0 {
			if err := reserveAllowance(c, prep.Amount); err != nil {
				r.release(t.table)
				return err
			}
			r.allowed, r.amount = c, prep.Amount
		}
	}
	return nil
}

// release gives back everything not yet committed.
func (r *reservation) release(tab *CapTable) {
	if !r.settled {
		if r.rated != nil {
			giveRate(r.rated)
		}
		if r.allowed != nil {
			releaseAllowance(r.allowed, r.amount)
		}
		if r.undo != nil {
			r.undo()
		}
		r.forgetUse()
		r.settled = true
	}
	r.unslot(tab)
}

// commit keeps the rate tokens and uses: the effect happened.
func (r *reservation) commit() {
	r.keepUse()
	r.settled = true
}

func (r *reservation) unslot(tab *CapTable) {
	if r.slot >= 0 {
		tab.unreserve(r.slot)
		r.slot = -1
	}
}

// install puts e in the reserved slot, after checking that a blob may
// enter the task (its clearance, the bytes it may hold).
func (r *reservation) install(t *Task, e entry) (abi.Handle, error) {
	if e.blob != nil {
		if err := t.mayHold(e.blob.Label()); err != nil {
			r.unslot(t.table)
			return 0, err
		}
	}
	h, err := t.table.fill(r.slot, e)
	r.slot = -1
	return h, err
}
