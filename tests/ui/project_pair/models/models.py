from threadloom import Model
from threadloom.testing import ScriptedProvider

m = Model(name="m", provider=ScriptedProvider(), model="default")
