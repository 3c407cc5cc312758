// Package wire carries the constructors that only the vault may call from
// the packages that define them to the vault, without exporting them.
package wire
