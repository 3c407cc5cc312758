package sequence

import "context"

// PeriodLabel returns the label of the period q's next call acts on (as
// Serial.Period names it): the period holding q's date for a handle of At,
// else the current date's, read in the series' time zone; "" for a series
// without periods. It reads the series' definition once per vault handle
// and never writes.
func (q *Sequence) PeriodLabel(ctx context.Context) (string, error) {
	t, _, err := q.resolve(ctx)
	if err != nil {
		return "", err
	}
	return t.period, nil
}
