import traceback
def install():
    traceback.print_stack()
