package kernel

// Revoke revokes c and everything derived from it, in every task (law 4).
// It takes effect at the next use: a call already inside a kind finishes,
// every later call, derivation or pass of any of these capabilities fails
// with EREVOKED. Revoking twice is harmless.
func (k *Kernel) Revoke(c *Cap) int {
	k.mu.Lock()
	defer k.mu.Unlock()
	n := 0
	stack := []*Cap{c}
	for len(stack) > 0 {
		x := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if !x.revoked.Swap(true) {
			n++
		}
		stack = append(stack, x.children...)
	}
	return n
}

// RevokeID revokes the capability with the given id and its descendants,
// reporting how many were newly revoked, or ErrNotFound.
func (k *Kernel) RevokeID(id string) (int, error) {
	c := k.capByID(id)
	if c == nil {
		return 0, Errorf(ErrNotFound.Errno, "no capability %q", id)
	}
	return k.Revoke(c), nil
}

func (k *Kernel) capByID(id string) *Cap {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, c := range k.caps {
		if c.id == id {
			return c
		}
	}
	return nil
}
