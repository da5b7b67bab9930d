// Command tool is "Bob's Online Tax Prep": it reads a W-2 summary from its
// input and returns a filled-in 1040 summary. It holds no capability: no
// network, no stored data, no payments. Its receipt proves it.
package main

import (
	"encoding/json"
	"fmt"

	mandate "github.com/mandatevm/mandate/guest-sdk"
)

type w2 struct {
	Name     string  `json:"name"`
	Wages    float64 `json:"wages"`
	Withheld float64 `json:"federal_tax_withheld"`
}

func main() {
	in, err := mandate.InputBytes()
	if err != nil {
		panic(err)
	}
	var w w2
	if err := json.Unmarshal(in, &w); err != nil {
		panic(err)
	}
	// A toy flat computation: the point is what the tool could not do.
	const standardDeduction = 14600.0
	taxable := max(w.Wages-standardDeduction, 0)
	tax := taxable * 0.12
	refund := w.Withheld - tax
	mandate.SetResult([]byte(fmt.Sprintf(
		"Form 1040 summary for %s\n  wages               %10.2f\n  standard deduction  %10.2f\n  taxable income      %10.2f\n  tax                 %10.2f\n  withheld            %10.2f\n  refund (owed if <0) %10.2f\n",
		w.Name, w.Wages, standardDeduction, taxable, tax, w.Withheld, refund)))
}
