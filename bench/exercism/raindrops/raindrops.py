def convert(number):
    pass
