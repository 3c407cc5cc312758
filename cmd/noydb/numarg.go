package main

import (
	"errors"
	"math"
	"strconv"
	"unicode"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// annotationNumber, in a command's Annotations, says in the user's words
// what the command's positional number is ("the number to seed to"), so a
// negative one, which the flag parser takes for a flag, gets the same
// message as any other number out of range.
const annotationNumber = "noydb/number"

// parseNumber parses a positional number; what says what it is for the
// message.
func parseNumber(what, s string) (uint64, error) {
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, badNumber(what, s)
	}
	return n, nil
}

func badNumber(what, s string) error {
	return usagef("%s must be a whole number from 0 to %d, not %q", what, uint64(math.MaxUint64), s)
}

// flagError makes every flag-parsing error a usage error, and says in the
// user's words what went wrong with a number: a negative positional number
// (which the parser reads as unknown shorthand flags, "-5") and a flag value
// that is no number of its type.
func (a *app) flagError(cmd *cobra.Command, err error) error {
	var ne *pflag.NotExistError
	if errors.As(err, &ne) {
		if group := ne.GetSpecifiedShortnames(); group != "" && unicode.IsDigit(rune(group[0])) {
			arg := "-" + group
			if what := cmd.Annotations[annotationNumber]; what != "" {
				return badNumber(what, arg)
			}
			return usagef("%v: to pass %q as an argument, put -- before it", err, arg)
		}
	}
	// The removed --recovery-code, given without its value: the same
	// message as with one (recovery.go).
	var ve *pflag.ValueRequiredError
	if errors.As(err, &ve) && ve.GetFlag() != nil && ve.GetFlag().Name == "recovery-code" {
		return oldRecoveryFlagError()
	}
	var ie *pflag.InvalidValueError
	if errors.As(err, &ie) {
		f := ie.GetFlag()
		name := "--" + f.Name
		if f.Shorthand != "" {
			name = "-" + f.Shorthand + "/" + name
		}
		switch f.Value.Type() {
		case "uint64":
			return usagef("%s must be a whole number from 0 to %d, not %q", name, uint64(math.MaxUint64), ie.GetValue())
		case "int":
			return usagef("%s must be a whole number, not %q", name, ie.GetValue())
		case "float64":
			return usagef("%s must be a number, not %q", name, ie.GetValue())
		}
	}
	return &usageError{msg: err.Error()}
}

// describeNumber returns cmd with annotationNumber set to what.
func describeNumber(cmd *cobra.Command, what string) *cobra.Command {
	if cmd.Annotations == nil {
		cmd.Annotations = map[string]string{}
	}
	cmd.Annotations[annotationNumber] = what
	return cmd
}
