package sequence

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// buildRuns against a model that keeps one state per number, on random
// small histories: the runs expand to the model's numbers, cover 1..head
// in order, and no two adjacent mergeable runs share a state.
func TestBuildRunsMatchesPerNumberModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 2000 {
		head := uint64(rng.IntN(40))
		var seeds []seedRange
		model := make([]NumberState, head+1)
		for n := range model {
			model[n] = StateMissing
		}
		for range rng.IntN(4) {
			from := uint64(rng.IntN(45))
			to := from + uint64(rng.IntN(10))
			seeds = addSeed(seeds, from, to)
			for n := from + 1; n <= min(to, head); n++ {
				model[n] = StateSeeded
			}
		}
		known := map[uint64]*numberFacts{}
		for range rng.IntN(12) {
			if head == 0 {
				break
			}
			n := 1 + uint64(rng.IntN(int(head)))
			st := []NumberState{StateUnbound, StateBound, StateVoided}[rng.IntN(3)]
			known[n] = &numberFacts{state: st}
			model[n] = st
		}
		runs := buildRuns(head, known, seeds)
		got := []NumberState{}
		next := uint64(1)
		for i, r := range runs {
			require.Equal(t, next, r.From, "round %d: runs %v", round, runs)
			require.LessOrEqual(t, r.From, r.To)
			if i > 0 && mergeable(r) && mergeable(runs[i-1]) {
				assert.NotEqual(t, runs[i-1].State, r.State, "round %d: unmerged runs %v", round, runs)
			}
			if !mergeable(r) {
				assert.Equal(t, r.From, r.To, "round %d: a bound or voided run is one number", round)
			}
			for range r.Len() {
				got = append(got, r.State)
			}
			next = r.To + 1
		}
		require.Equal(t, model[1:], got, "round %d: head %d seeds %v", round, head, seeds)
	}
}

// Seeds merge when they touch or overlap, and stay sorted.
func TestAddSeed(t *testing.T) {
	var s []seedRange
	s = addSeed(s, 10, 20) // 11..20
	s = addSeed(s, 0, 5)   // 1..5
	s = addSeed(s, 30, 40) // 31..40
	assert.Equal(t, []seedRange{{1, 5}, {11, 20}, {31, 40}}, s)
	s = addSeed(s, 20, 30) // 21..30 joins both neighbours
	assert.Equal(t, []seedRange{{1, 5}, {11, 40}}, s)
	s = addSeed(s, 5, 10) // 6..10
	assert.Equal(t, []seedRange{{1, 40}}, s)
	s = addSeed(slices.Clone(s), 12, 15) // inside
	assert.Equal(t, []seedRange{{1, 40}}, s)
	top := addSeed(nil, 1<<64-3, 1<<64-1)
	assert.Equal(t, []seedRange{{1<<64 - 2, 1<<64 - 1}}, addSeed(top, 1<<64-2, 1<<64-1))
	r, ok := skippedBySeed(s, 40)
	assert.True(t, ok)
	assert.Equal(t, seedRange{1, 40}, r)
	_, ok = skippedBySeed(s, 41)
	assert.False(t, ok)
}
