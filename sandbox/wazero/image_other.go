//go:build !linux

package wazero

import "errors"

var errNoMapping = errors.New("no copy-on-write mapping on this system")

func sealedMemfd(*imageData) (int, error) { return -1, errNoMapping }

func closeFd(int) {}

func mapReadOnly(int, uint64) []byte { return nil }

func readFd(int, []byte) error { return errNoMapping }

type mappedMemory struct{ im *memImage }

func (*memImage) pooled(*memoryLimiter, uint64) *mappedMemory { return nil }
func (*memImage) drainPool()                                  {}

func mapImage(int, uint64, uint64, *memoryLimiter) (*mappedMemory, error) {
	return nil, errNoMapping
}

func (*mappedMemory) Reallocate(uint64) []byte { return nil }
func (*mappedMemory) Free()                    {}

// keepGrown is image_linux.go's; no memory is pooled here.
var keepGrown uint64
