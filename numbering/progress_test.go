package numbering_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/noydb-go/noydb/internal/faultstore"
	"github.com/noydb-go/noydb/numbering"
	"github.com/noydb-go/noydb/stores/memstore"
)

// TestPassProgress watches a pass's Progress from inside the store's calls:
// the phases come in order (reading, checking, numbering), each one's count
// never goes back and stays within its total, the records are counted one by
// one as they are stamped (a store without transactions stamps them one at
// a time), and the handle is idle once the pass returns.
func TestPassProgress(t *testing.T) {
	ctx := context.Background()
	for _, hide := range []bool{true, false} {
		t.Run(fmt.Sprintf("transactions=%v", !hide), func(t *testing.T) {
			const n = 40
			var (
				mu     sync.Mutex
				seen   []numbering.PassProgress
				series *numbering.Series
			)
			watch := func(_ faultstore.Op, key string) error {
				mu.Lock()
				defer mu.Unlock()
				if series != nil && (strings.Contains(key, "/receipts/") || strings.Contains(key, "_numbering/")) {
					seen = append(seen, series.Progress())
				}
				return nil
			}
			st := faultstore.New(memstore.New(), faultstore.Options{HideTransactor: hide, Before: watch})
			d := openDevice(t, "till", st, receiptOpts)
			numbering.Tune(d.series, 8, 16)
			for i := range n {
				d.write(t, fmt.Sprintf("r-%03d", i), i)
			}
			assert.Equal(t, numbering.PassProgress{}, d.series.Progress(), "idle before")
			mu.Lock()
			series = d.series
			mu.Unlock()
			_, err := d.series.RunPass(ctx)
			require.NoError(t, err)
			mu.Lock()
			series = nil
			mu.Unlock()
			assert.Equal(t, numbering.PassProgress{}, d.series.Progress(), "idle after")

			phase, done := numbering.PassIdle, -1
			byPhase := map[numbering.PassPhase][]int{}
			for _, p := range seen {
				if p.Phase == numbering.PassIdle {
					continue
				}
				require.GreaterOrEqual(t, p.Phase, phase, "phases go forward: %v after %v", p.Phase, phase)
				if p.Phase != phase {
					phase, done = p.Phase, -1
				}
				require.GreaterOrEqual(t, p.Done, done, "%v goes back", p.Phase)
				done = p.Done
				if p.Phase != numbering.PassReading {
					require.Equal(t, n, p.Total, "%v total", p.Phase)
					require.LessOrEqual(t, p.Done, p.Total)
				}
				byPhase[p.Phase] = append(byPhase[p.Phase], p.Done)
			}
			require.NotEmpty(t, byPhase[numbering.PassChecking])
			require.NotEmpty(t, byPhase[numbering.PassNumbering])
			distinct := map[int]bool{}
			for _, d := range byPhase[numbering.PassNumbering] {
				distinct[d] = true
			}
			if hide {
				// One stamp at a time: the count moves between steps too.
				assert.Greater(t, len(distinct), n/2, "numbering progress moves per record: %v", byPhase[numbering.PassNumbering])
			} else {
				assert.Greater(t, len(distinct), 2, "numbering progress moves per step: %v", byPhase[numbering.PassNumbering])
			}
		})
	}
}
