// Package raw declares the host calls of the ABI with every pointer a
// plain uint32, for the attack guests that hand the kernel pointers and
// lengths no SDK would (out of bounds, wrapping past 2^32). Guests only:
// everything but this comment builds for wasip1 alone.
package raw
