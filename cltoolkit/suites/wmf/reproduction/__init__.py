"""The seed-reproduction analysis of the wmf protocols, beside the benchmark itself: how clt's records compare with
seed 000's stored runs (`reference`), the seed's own descriptive analyses and clt's training adequacy (`seedstats`),
and the seed's findings re-tested on clt's runs (`findings`). The suite's analysis (`wmf.analysis`) calls them; the
benchmark's engine (data, training, evaluation) never does. Descriptive: nothing here decides a gate."""
