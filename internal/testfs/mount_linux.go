package testfs

import "syscall"

func mountReadOnly(dir string) error {
	if err := syscall.Mount(dir, dir, "", syscall.MS_BIND, ""); err != nil {
		return err
	}
	if err := syscall.Mount("", dir, "", syscall.MS_REMOUNT|syscall.MS_BIND|syscall.MS_RDONLY, ""); err != nil {
		syscall.Unmount(dir, 0)
		return err
	}
	return nil
}

func unmount(dir string) error { return syscall.Unmount(dir, 0) }
