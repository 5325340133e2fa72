package analyze

import "errors"

func errorsIsBad(err error) bool { return errors.Is(err, ErrBadInput) }
