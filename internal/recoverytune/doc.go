// Package recoverytune lets tests set a recovery's tuning, which users
// cannot: package recovery reads it from a Lister that is Tuned.
package recoverytune
