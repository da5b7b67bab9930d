//go:build !linux

package testfs

import "errors"

func mountReadOnly(string) error { return errors.New("bind mounts are Linux-only") }

func unmount(string) error { return nil }
