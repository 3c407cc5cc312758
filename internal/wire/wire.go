// Package wire connects the vault to the constructors of the packages it
// is built from (ledger, sequence, numbering) without making those
// constructors public: they need a sealer, a MAC key and a store prefix,
// which only the vault can supply correctly.
//
// Each such package sets a hook here in its init function, a variable of
// type any holding its unexported constructor, and the vault, its one
// caller, asserts the hook to the constructor's concrete func type with
// Hook. The hooks are any so that this package imports none of the
// packages it wires (they import it); a test in package vault checks that
// every hook is set and has the type the vault asserts.
package wire

import "fmt"

// Hook returns hook as a T. It panics when hook is unset (the package that
// sets it was not linked in) or holds another type than T (the constructor
// changed without its caller): both are programming errors that the vault's
// tests catch.
func Hook[T any](name string, hook any) T {
	if hook == nil {
		panic("wire: hook " + name + " is not set")
	}
	f, ok := hook.(T)
	if !ok {
		var want T
		panic(fmt.Sprintf("wire: hook %s is a %T, want a %T", name, hook, want))
	}
	return f
}
