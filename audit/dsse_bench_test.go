package audit

import "testing"

// BenchmarkReceiptSign: a receipt signed as a note and as a DSSE
// envelope (statement built, validated, encoded, signed), and the
// envelope opened again.
//
//	go test ./audit -run '^$' -bench ReceiptSign -benchtime 2000x
func BenchmarkReceiptSign(b *testing.B) {
	l, _ := open(b)
	r := testReceipt(b, l)
	b.Run("note", func(b *testing.B) {
		for b.Loop() {
			if _, err := l.SignReceipt(r); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("dsse", func(b *testing.B) {
		for b.Loop() {
			st, err := ReceiptStatement(r)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := l.SignStatement(st); err != nil {
				b.Fatal(err)
			}
		}
	})
	st, _ := ReceiptStatement(r)
	env, _ := l.SignStatement(st)
	b.Run("dsse-open", func(b *testing.B) {
		for b.Loop() {
			st, err := OpenEnvelope(env, l.VerifierKey())
			if err != nil {
				b.Fatal(err)
			}
			if _, err := ReceiptFromStatement(st, l.VerifierKey()); err != nil {
				b.Fatal(err)
			}
		}
	})
}
