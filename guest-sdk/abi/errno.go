package abi

// Errno is the result of every host call. Zero means success.
type Errno uint32

// Errno values. Their meaning per host call is in ABI.md. Values are stable:
// new ones are only appended.
const (
	ESUCCESS   Errno = 0  // success
	EBADHANDLE Errno = 1  // the handle is not in the caller's table: invented, stale or foreign
	EDENIED    Errno = 2  // the capability does not allow this (scope, op, widening)
	EREVOKED   Errno = 3  // the capability or one of its ancestors was revoked
	EEXPIRED   Errno = 4  // the capability has expired
	EFLOW      Errno = 5  // the data's label may not flow to this sink
	ELIMIT     Errno = 6  // a size, count or budget limit was reached
	EFAULT     Errno = 7  // a pointer or length lies outside the guest's memory
	EINVAL     Errno = 8  // a malformed argument (bad encoding, bad name)
	EAPPROVAL  Errno = 9  // a required approval was refused
	ENOTFOUND  Errno = 10 // no such capability name, or no input
	ENOTSUP    Errno = 11 // the capability's kind has no such operation
	EIO        Errno = 12 // the effect failed outside the kernel (upstream error)
	ETIMEDOUT  Errno = 13 // the effect did not finish within its timeout
	EWRONGTYPE Errno = 14 // the handle names a blob where a capability was expected, or the reverse
	EINTERNAL  Errno = 15 // the kernel failed; the call was denied (fail closed)
	ECHILD     Errno = 16 // the child task did not finish normally (failed, killed, out of limits)
)

var errnoNames = [...]string{
	ESUCCESS:   "ESUCCESS",
	EBADHANDLE: "EBADHANDLE",
	EDENIED:    "EDENIED",
	EREVOKED:   "EREVOKED",
	EEXPIRED:   "EEXPIRED",
	EFLOW:      "EFLOW",
	ELIMIT:     "ELIMIT",
	EFAULT:     "EFAULT",
	EINVAL:     "EINVAL",
	EAPPROVAL:  "EAPPROVAL",
	ENOTFOUND:  "ENOTFOUND",
	ENOTSUP:    "ENOTSUP",
	EIO:        "EIO",
	ETIMEDOUT:  "ETIMEDOUT",
	EWRONGTYPE: "EWRONGTYPE",
	EINTERNAL:  "EINTERNAL",
	ECHILD:     "ECHILD",
}

// String returns the symbolic name, e.g. "EDENIED".
func (e Errno) String() string {
	if int(e) < len(errnoNames) {
		return errnoNames[e]
	}
	return "Errno(" + itoa(uint32(e)) + ")"
}

// Error makes Errno usable as an error in guest code.
func (e Errno) Error() string { return e.String() }

func itoa(v uint32) string {
	var b [10]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + v%10)
		v /= 10
		if v == 0 {
			return string(b[i:])
		}
	}
}
