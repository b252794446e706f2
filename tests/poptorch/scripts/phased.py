# A script asking for an execution strategy ipuexp does not emulate.
import poptorch

opts = poptorch.Options()
opts.setExecutionStrategy(poptorch.SerialPhasedExecution("B1", "B2"))
