// Package race tells whether the race detector is built in, so that tests
// whose cost grows several times under -race can size their work to it
// (and say so), rather than each reading the build settings itself.
package race
