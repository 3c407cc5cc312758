package wire

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestCorrectionTextRoundTrip(t *testing.T) {
	for _, r := range []CorrectionRef{
		{Series: "invoices", N: 1},
		{Series: "invoices", Period: "FY2026-27", N: 3},
		{Series: "fatture", Partition: []string{"shop 1", `a"b`, "x], y", "ü"}, Period: "2026-03", N: 18446744073709551615},
	} {
		text := CorrectionText(r)
		got, ok := ParseCorrection(text)
		assert.True(t, ok, text)
		assert.Equal(t, r, got, text)
	}
	assert.Equal(t, `corrects "inv"["a", "b"] period 2026 number 7`,
		CorrectionText(CorrectionRef{Series: "inv", Partition: []string{"a", "b"}, Period: "2026", N: 7}))
	for _, bad := range []string{
		"", "cancelled by the customer", `corrects "inv" number 0`, `corrects "inv" number 07`,
		`corrects "inv"`, `corrects inv number 1`, `corrects "inv" number 1 `, `corrects "" number 1`,
		`corrects "inv"[] number 1`, `corrects "inv"["a" number 1`, `corrects "inv" period  number 1`,
		`corrects "inv" number 18446744073709551616`, "corrects `inv` number 1", `corrects "\x69nv" number 1`,
	} {
		_, ok := ParseCorrection(bad)
		assert.False(t, ok, bad)
	}
}
