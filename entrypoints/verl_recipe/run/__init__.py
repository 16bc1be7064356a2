"""A run, from launch to its end: the launcher and its supervisor (launcher), the run folder (record), the verbs
over a run that goes on without its operator (lifecycle), the restart policy (restart) and the step-integrity
verdict (steps). What watches a run is watch/, what explains a failure diagnosis/, what reads it afterwards review/."""
