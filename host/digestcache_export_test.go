package host

import "time"

// SetRacyWindowForTest sets how recently changed a module file may be and
// still have its digest recorded (digestcache.go); the returned func
// restores it.
func SetRacyWindowForTest(d time.Duration) func() {
	old := racyWindow
	racyWindow = d
	return func() { racyWindow = old }
}
