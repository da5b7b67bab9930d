package kernel

import (
	"fmt"
	"slices"
)

// Observer is told when tasks start and end. A host uses it to stream a
// run's progress and to record, then forget, the tasks that ended. Its
// methods run on the kernel's goroutines, with no kernel lock held, and
// must not block: a host records and forgets an ended task on a goroutine
// of its own (host.Run's recorder), once its record is written.
type Observer interface {
	// TaskStarted is called once a task is running: a root task, a child
	// a task spawned, or a host child (StartChild).
	TaskStarted(t *Task)
	// TaskEnded is called once a task has ended, after its children did,
	// with its state, result and output final.
	TaskEnded(t *Task)
}

// Parent is the task that spawned t, nil for a root task.
func (t *Task) Parent() *Task { return t.parent }

// Ended reports whether t has ended.
func (t *Task) Ended() bool {
	select {
	case <-t.done:
		return true
	default:
		return false
	}
}

// Forget drops t, a task that has ended, and its descendants, with every
// capability they held, from the kernel's memory: Tasks and Graph no
// longer list them and their blobs, results and output can be collected.
// A long-lived kernel (an agent host, an MCP session serving calls for
// days) calls it once their record is stored, so it does not grow with
// the tasks it ran.
//
// Nothing forgotten can matter to a later decision. A task's capabilities
// and everything derived from them are held by the task or its
// descendants (passing goes from parent to child only), so only whole
// subtrees of the derivation tree leave, and none of them can be used
// again: their holders have ended. What they spent stays spent, in the
// allowances of the ancestors that remain, and a revocation of an
// ancestor still reaches everything left. Forgetting a task that is still
// running is an error; forgetting one twice is harmless.
func (k *Kernel) Forget(t *Task) error {
	if t == nil || t.k != k {
		return fmt.Errorf("kernel: forget: not a task of this kernel")
	}
	if !t.Ended() {
		return fmt.Errorf("kernel: forget: task %s is still running", t.id)
	}
	// A task ends only after its children have: every descendant has ended.
	gone := map[*Task]bool{}
	stack := []*Task{t}
	for len(stack) > 0 {
		x := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		gone[x] = true
		x.mu.Lock()
		stack = append(stack, x.kids...)
		x.mu.Unlock()
	}
	if p := t.parent; p != nil {
		p.mu.Lock()
		// A new slice: the parent, ending, may be reading the old one
		// outside the lock.
		p.kids = slices.DeleteFunc(slices.Clone(p.kids), func(x *Task) bool { return x == t })
		p.mu.Unlock()
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.tasks = slices.DeleteFunc(k.tasks, func(x *Task) bool { return gone[x] })
	k.caps = slices.DeleteFunc(k.caps, func(c *Cap) bool {
		if !gone[c.holder] {
			return false
		}
		if p := c.parent; p != nil && !gone[p.holder] {
			p.children = slices.DeleteFunc(p.children, func(x *Cap) bool { return x == c })
		}
		return true
	})
	return nil
}
