"""Results run by hand: result files of other clients (`formats`) read into bench_serving-shaped
records and measurements (`records`), written as a run directory (`command`); two runs of one
experiment compared (`compare`)."""
